"""glyphpack eval: how well a model reads pages, measured with the user's own key."""
