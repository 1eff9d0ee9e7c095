"""Read a server's ``/metrics`` back as numbers, for tests that check what a turn moved."""

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    """One scrape: every sample by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = [
            (sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]

    def value(self, name: str, **labels: str) -> float:
        """The sum over the samples of ``name`` whose labels include ``labels`` (0 if none)."""
        return sum(
            value
            for sample, have, value in self.samples
            if sample == name and all(have.get(k) == v for k, v in labels.items())
        )

    def series(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(have, value) for sample, have, value in self.samples if sample == name]


def scrape(base_url: str, headers: dict[str, str] | None = None) -> Scrape:
    request = urllib.request.Request(f"{base_url}/metrics", headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return Scrape(response.read().decode())
