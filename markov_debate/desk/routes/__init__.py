"""The desk's JSON API, one router per resource: audits, batches, reviews, stats (health included)."""
