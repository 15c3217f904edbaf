#!/usr/bin/env python
"""The Scrapy side of bench/fetch.py's throughput benchmark, run as a subprocess (Twisted's
reactor cannot share a process with our asyncio loops or a second run).

    python bench/_scrapy_fetch.py --urls FILE --concurrency 64 --user-agent UA --out-json FILE
                                  [--links linkextractor|css]

Fetches every URL of FILE (one per line) once, with the politeness settings deltacrawl uses:
CONCURRENT_REQUESTS = --concurrency, CONCURRENT_REQUESTS_PER_DOMAIN = 1, DOWNLOAD_DELAY = 0,
ROBOTSTXT_OBEY = True; no retries, no redirects followed, no cookies, no AutoThrottle;
Scrapy's broad-crawl scheduler queue (DownloaderAwarePriorityQueue). Each 200 response has its
links extracted (LinkExtractor by default, or response.css('a::attr(href)') + urljoin) and
counted; nothing is followed. Writes pages, statuses, link count, crawl seconds (engine
started -> spider closed) and process seconds to --out-json.

Loopback only: it requests exactly the URLs it is given (plus each host's robots.txt).
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections import Counter

PROCESS_START = time.perf_counter()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--urls", required=True)
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--user-agent", required=True)
    p.add_argument("--out-json", required=True)
    p.add_argument("--links", choices=("linkextractor", "css"), default="linkextractor")
    p.add_argument("--timeout-s", type=float, default=60.0)
    args = p.parse_args()
    with open(args.urls, encoding="utf-8") as fh:
        urls = [line.strip() for line in fh if line.strip()]
    for url in urls:  # a guard: this script only ever talks to loopback
        host = url.split("/", 3)[2].rsplit(":", 1)[0]
        if not host.startswith("127."):
            raise SystemExit(f"refusing non-loopback URL {url}")

    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.linkextractors import LinkExtractor

    tally = {"pages": 0, "links": 0, "statuses": Counter(), "opened": None, "closed": None}
    extractor = LinkExtractor() if args.links == "linkextractor" else None

    class BenchSpider(scrapy.Spider):
        name = "bench"

        @classmethod
        def from_crawler(cls, crawler, *a, **kw):
            spider = super().from_crawler(crawler, *a, **kw)
            crawler.signals.connect(spider.opened, signal=signals.spider_opened)
            crawler.signals.connect(spider.closed_, signal=signals.spider_closed)
            return spider

        def opened(self, spider):
            tally["opened"] = time.perf_counter()

        def closed_(self, spider, reason):
            tally["closed"] = time.perf_counter()
            tally["reason"] = reason

        async def start(self):
            for url in urls:
                yield scrapy.Request(url, callback=self.parse, errback=self.failed, dont_filter=True)

        def parse(self, response):
            tally["pages"] += 1
            tally["statuses"][str(response.status)] += 1
            if response.status == 200:
                if extractor is not None:
                    tally["links"] += len(extractor.extract_links(response))
                else:
                    tally["links"] += len({response.urljoin(h) for h in response.css("a::attr(href)").getall()})
            return None

        def failed(self, failure):
            tally["statuses"][type(failure.value).__name__] += 1

    settings = {
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CONCURRENT_REQUESTS_PER_IP": 0,
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": True,
        "AUTOTHROTTLE_ENABLED": False,
        "COOKIES_ENABLED": False,       # also keeps tldextract from looking for the public suffix list
        "RETRY_ENABLED": False,
        "REDIRECT_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,
        "TELNETCONSOLE_ENABLED": False,
        "DOWNLOAD_TIMEOUT": args.timeout_s,
        "USER_AGENT": args.user_agent,
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",  # Scrapy's broad-crawl advice
        "LOG_LEVEL": "WARNING",
        "LOGSTATS_INTERVAL": 0,
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BenchSpider)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    crawl_s = (tally["closed"] or time.perf_counter()) - (tally["opened"] or PROCESS_START)
    out = {
        "urls": len(urls), "pages": tally["pages"], "links": tally["links"],
        "statuses": dict(sorted(tally["statuses"].items())), "close_reason": tally.get("reason"),
        "seconds": crawl_s, "pages_per_s": tally["pages"] / crawl_s if crawl_s > 0 else None,
        "process_seconds": time.perf_counter() - PROCESS_START,
        "requests": stats.get("downloader/request_count"),
        "robots_requests": stats.get("robotstxt/request_count"),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "links_mode": args.links, "scrapy": scrapy.__version__,
        "settings": {k: v for k, v in settings.items() if k not in ("LOG_LEVEL", "LOGSTATS_INTERVAL")},
    }
    with open(args.out_json, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2)
    return 0 if tally["pages"] == len(urls) else 1


if __name__ == "__main__":
    sys.exit(main())
