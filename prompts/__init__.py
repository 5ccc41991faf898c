"""Prompt files shipped as package data; load them with `debate.calls.load_prompt(name)`."""
