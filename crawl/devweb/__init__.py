"""The bundled multi-host test web (loopback only), with hostile hosts: what demos, tests and benchmarks crawl."""
from __future__ import annotations

from crawl.fetch.identity import is_shipped_user_agent

# What `deltacrawl crawl --with-devweb` sends when the user left fetch.user_agent as shipped: it
# names the test web as the crawl's operator and contact, so its crawls pass the operator-identity
# rule (crawl/fetch/identity.py) whatever hosts it serves, and its request log tells them apart.
DEVWEB_USER_AGENT = "deltacrawl-devweb/0.1 (+http://127.0.0.1/; devweb@localhost)"


def devweb_user_agent(user_agent: str) -> str:
    """The User-Agent a crawl of the test web sends: the user's own, or DEVWEB_USER_AGENT in place
    of the shipped default."""
    return DEVWEB_USER_AGENT if is_shipped_user_agent(user_agent) else user_agent
