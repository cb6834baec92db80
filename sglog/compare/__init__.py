"""Two runs -> what changed between them and a verdict (``diff``); rendering is in ``sglog.render.diff``."""
