"""Page fingerprints (SHA-1, SimHash, MinHash) and the near-duplicate rules (and the optional C MinHash)."""
