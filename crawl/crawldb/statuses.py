"""The values of the crawldb's ``status`` column (docs/crawldb.md): what the last answer made of
a URL. Transitions between them are crawl.crawldb.status's; the schedule reads them too
(crawl.crawldb.schedule: which URLs rank by their refresh value)."""
from __future__ import annotations

UNFETCHED = "unfetched"
FETCHED = "fetched"
NOTMODIFIED = "notmodified"
REDIRECT_TEMP = "redirect_temp"
REDIRECT_PERM = "redirect_perm"
RETRY = "retry"
GONE = "gone"
ROBOTS_DENIED = "robots_denied"
DUPLICATE = "duplicate"
BLOCKED_ADDRESS = "blocked_address"

ALL_STATUSES = (UNFETCHED, FETCHED, NOTMODIFIED, REDIRECT_TEMP, REDIRECT_PERM, RETRY, GONE,
                ROBOTS_DENIED, DUPLICATE, BLOCKED_ADDRESS)
# No status keeps a URL out of generate: every one comes due again at its next_fetch_at (a duplicate
# or a robots_denied URL after schedule.max_interval_s, a retry after its backoff, ...), and
# a URL that is never to be fetched again has next_fetch_at NULL (crawl.crawldb.status: gone after
# its last check).
