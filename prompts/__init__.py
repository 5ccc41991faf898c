"""Prompt files shipped as package data; load them with `debate.engine._prompts.load_prompt(name)`."""
