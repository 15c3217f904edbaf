"""The crawl database's model: URL statuses and transitions, the recrawl schedule, seeds, discovered URLs."""
