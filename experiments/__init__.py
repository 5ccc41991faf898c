"""Experiments on HaluEval and FactPrompts (paper protocol, baselines, ablations) live here."""
