"""The lesson notebooks as runnable objects: headless execution with time and memory measured."""

from kvlab.lessons.runner import NotebookRun, first_error, run_notebook

__all__ = ["NotebookRun", "first_error", "run_notebook"]
