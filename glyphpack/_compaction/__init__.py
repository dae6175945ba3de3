"""The compaction ladder (no numba until a snapshot is rendered).

cost       CostModel: what messages cost one reader
results    CompactionPolicy, RungReport, RungResult, LadderReport, Compaction
rungs      elision and image drop (the free rungs)
snapshot   the middle rendered to pages; the snapshot text of each block
summarize  the caller's summarizer, chunked to its own window
ladder     compact, shake, should_compact: the rungs in order
recovery   parse_overflow, recover: after a provider's "too long"
calibration  Calibration, calibrate: the estimate as a provider's counts corrected it
"""
