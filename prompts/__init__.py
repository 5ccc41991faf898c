"""Prompt files shipped as package data; load them with `debate.prompts.load_prompt(name)`."""
