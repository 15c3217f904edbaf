"""Fetching politely: the per-task fetcher, politeness, robots.txt, bounded bodies, sitemap reading, the request log, WARC writing."""
