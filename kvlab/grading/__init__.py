"""Batch grading of the exercise notebooks, the way a teacher collects them.

``kvlab grade SUBMISSIONS_DIR`` finds every student's exercise notebooks (one folder per student,
as nbgrader lays them out), runs each headless in its own kernel under a time and a memory limit,
runs kvlab's checks on what the notebook defined, and writes one row per (student, exercise, check)
with the status, the case the report names and the message the student would have seen.

* :mod:`kvlab.grading.submissions` — finding the notebooks and the exercise each one is;
* :mod:`kvlab.grading.notebook_run` — executing one notebook with nbclient and collecting the checks;
* :mod:`kvlab.grading.summary` — the CSV and the tables per student and per exercise.
"""

from kvlab.grading.notebook_run import GradeLimits, GradeRow, grade_notebook
from kvlab.grading.submissions import Submission, find_submissions
from kvlab.grading.summary import grade_all, hardest_cases_table, student_table, write_csv

__all__ = [
    "GradeLimits",
    "GradeRow",
    "Submission",
    "find_submissions",
    "grade_all",
    "grade_notebook",
    "hardest_cases_table",
    "student_table",
    "write_csv",
]
