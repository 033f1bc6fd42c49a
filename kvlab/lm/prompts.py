"""Prompts for comparing greedy generations across caches (kvlab's own, short and varied)."""

GENERATION_PROMPTS: tuple[str, ...] = (
    "The capital of France is",
    "To make a cup of tea, first",
    "The three primary colours are",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The main difference between a list and a tuple in Python is",
    "Water boils at a temperature of",
    "A key-value cache in a language model stores",
)
