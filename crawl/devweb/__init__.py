"""The bundled multi-host test web (loopback only), with hostile hosts: what demos, tests and benchmarks crawl."""
