"""Distribution-level helpers of markov-debate; the engine itself is the `debate` package."""
