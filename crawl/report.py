"""Plain-text rendering of crawl statistics (the readdb-style table of ``deltacrawl stats``)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from crawl import native


def _section(title: str, rows: Sequence[tuple[str, Any]], total: int | None = None) -> list[str]:
    lines = [title]
    if not rows:
        return lines + ["  (none)"]
    width = max(len(str(k)) for k, _ in rows)
    for key, value in rows:
        share = f"  {100.0 * value / total:5.1f}%" if total else ""
        lines.append(f"  {str(key):<{width}}  {value:>10,}{share}")
    return lines


def format_stats(stats: Mapping[str, Any]) -> str:
    """Render the dict produced by jobs.stats.collect_stats."""
    total = int(stats["total_urls"])
    lines = [f"crawldb {stats['crawl_root']}  (Delta version {stats['version']})",
             f"  {'total URLs':<14}{total:>12,}",
             f"  {'hosts':<14}{int(stats['hosts']):>12,}",
             f"  {'due now':<14}{int(stats['due_now']):>12,}",
             f"  {'leased':<14}{int(stats['leased']):>12,}",
             f"  {'max depth':<14}{int(stats['max_depth'] or 0):>12,}"]
    for segment, n, until in stats.get("leases") or []:
        stamp = segment.split("-", 1)[0]  # a segment id starts with its generate's time, YYYYmmddHHMMSS
        since = (f" since {stamp[:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[8:10]}:{stamp[10:12]} UTC"
                 if len(stamp) == 14 and stamp.isdigit() else "")
        lines.append(f"    {n:,} leased by segment {segment}{since} until {until} UTC: if its fetch stopped, "
                     f"'deltacrawl fetch {segment}' runs it again (then dedup and update); to abandon it, "
                     f"remove {stats['crawl_root']}/segments/{segment}: its URLs are due again when the lease ends")
    missing = [name for name, built in (stats.get("native_code") or {}).items() if not built]
    if missing:
        lines.append(f"  compiled code missing (slower Python instead): {', '.join(native.dotted(m) for m in missing)}")
    lines += _section("by status", stats["by_status"], total)
    lines += _section("by HTTP status", [(str(k) if k is not None else "(none)", v)
                                         for k, v in stats["by_http_status"]], total)
    if stats.get("by_content_type"):
        lines += _section("by content type (url_state.content_type), with parse errors",
                          [(f"{ctype} ({errors:,} parse errors)" if errors else ctype, n)
                           for ctype, n, errors in stats["by_content_type"]], total)
    if "held_back" in stats:
        lines += _section("held back by their host, by reason (url_state.held_back)", stats["held_back"], total)
    if stats.get("blocked"):
        lines += _section("refused by the address guard, by reason (fetch.allow_networks, fetch.allow_ports)",
                          stats["blocked"], total)
    lines += _section(f"top {len(stats['top_hosts'])} hosts by URLs", stats["top_hosts"], total)
    hostdb = stats.get("hostdb")
    if hostdb:
        lines += ["hosts held back",
                  f"  {'deferred (Crawl-delay too large)':<36}{int(hostdb['deferred']):>8,}",
                  f"  {'backing off (429/503, robots.txt)':<36}{int(hostdb['backing_off']):>8,}",
                  f"  {'robots.txt unreachable/unparsable':<36}{int(hostdb.get('robots_errors') or 0):>8,}",
                  f"  {'name did not resolve (dns_error)':<36}{int(hostdb.get('dns_errors') or 0):>8,}",
                  f"  {'TLS handshake failed (tls_error)':<36}{int(hostdb.get('tls_errors') or 0):>8,}"]
        lines += _section("hosts stopped in their last cycle, by reason", hostdb["stopped"])
        if hostdb["overrides"]:
            lines.append("hosts with politeness overrides")
            lines += [f"  {host}  {what}" for host, what in hostdb["overrides"]]
        links = hostdb.get("links") or {}
        if links:
            lines += ["links (all cycles)",
                      f"  {'found on pages':<36}{int(links['found']):>12,}",
                      f"  {'kept (new to the crawl)':<36}{int(links['kept']):>12,}",
                      f"  {'listed in sitemaps (last reading)':<36}{int(links['sitemap_urls']):>12,}"]
            lines += _section("links dropped, by reason", hostdb.get("link_rejects") or [])
        if hostdb.get("sitemap_errors"):
            lines.append(f"sitemap and feed files refused or cut short (all cycles): {int(hostdb['sitemap_errors']):,}")
            lines += [f"  {host}  {what}" for host, what in hostdb.get("sitemap_problem_hosts") or []]
        dns = hostdb.get("dns") or {}
        if dns.get("queries"):
            lines.append(f"DNS queries (all cycles): {dns['queries']:,} for {dns['hosts']:,} hosts, "
                         f"{dns['queries'] / max(1, dns['hosts']):.1f} per host; the most:")
            lines += [f"  {host}  {what}" for host, what in dns.get("most") or []]
        if hostdb.get("traps"):
            lines.append("hosts that looked like traps (budget lowered)")
            lines += [f"  {host}  {what}" for host, what in hostdb["traps"]]
    return "\n".join(lines)
