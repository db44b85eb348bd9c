"""``sdc audit``: a release re-derived from its source and config copy and checked file by file
(:mod:`.verify`, :mod:`.rederive`)."""
