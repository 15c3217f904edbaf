"""URLs: normalising, filtering, the seen-URL Bloom filter (and the optional C copy of the per-link path)."""
