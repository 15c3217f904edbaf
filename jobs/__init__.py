"""The steps' entry points, one module per step (``deltacrawl <step>`` or ``spark-submit
jobs/<step>.py``), and the ``deltacrawl`` command (cli.py) that dispatches to them. What the
steps share is in jobs/engine/, which never imports a step.
"""
