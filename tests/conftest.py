import os
import tempfile

# Keep compiled atlases of the test run out of the user's cache; a fixed directory
# per machine still lets later runs load them without parsing.
os.environ.setdefault("GLYPHPACK_CACHE_DIR", os.path.join(tempfile.gettempdir(), "glyphpack-test-cache"))

from hypothesis import settings

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=60, deadline=None)
# A longer hunt for rare failures: pytest --hypothesis-profile=deep
settings.register_profile("deep", max_examples=600, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
