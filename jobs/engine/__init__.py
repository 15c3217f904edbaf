"""The Spark side every step is built from: session and jars, packing the code for a cluster, the
crawl root's tables (schemas, paths and markers, Delta table upkeep, reads, writes), commit labels,
logging, run tracking, the error policy, and the DataFrame pieces a step uses that are not a
step themselves (the seen-URL filter of fetch, the discovered-URL rows of update).

It never imports a step (jobs/<step>.py; tests/test_purity.py holds it to that), so the steps
import it and each other never: a rule two steps share lives here or, when it needs no Spark,
in crawl/. Why "engine": the commands in jobs/ stay thin and the engine is elsewhere,
as in Scrapy; and the name is importable as no other top-level module, which matters because
spark-submit puts jobs/ first on sys.path when it runs a step's file.
"""
