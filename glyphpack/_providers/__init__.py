"""Providers: who reads a page and who bills it; numpy only, no numba, no history.

    geometry     resize rules and token formulas, one class per kind (rarely change)
    profile      Reader, Route, Profile: page sizing and pricing for one model id
    catalog      the readers, routes and model-id prefixes: data only (changes monthly)
    resolve      model ids as callers write them -> Profile; the catalog as rows
    blocks       a PNG as an image content block of each provider API
    text_tokens  a per-script estimate of what text costs in tokens
"""
