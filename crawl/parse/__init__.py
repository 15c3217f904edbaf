"""Reading fetched bytes in a guarded child process: pages (charset, title, text), links, sitemaps."""
