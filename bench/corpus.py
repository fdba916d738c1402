"""A seeded synthetic corpus for the latency benchmark: memories that look like what an agent
stores (decisions with reasons, preferences, incidents, meetings, deadlines, people), 60-400
characters, with entities, dates and projects, plus questions about them.

Seeded so two runs (and two machines) time the same work; a stream, so growing the store from 1k
to 10k to 100k memories adds the next items instead of starting over.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

PEOPLE = [
    "Alice Moreau",
    "Bilal Haddad",
    "Chen Wei",
    "Dana Kowalski",
    "Emeka Obi",
    "Farah Nasser",
    "Gustavo Lima",
    "Hana Sato",
    "Ivan Petrov",
    "Julia Berg",
    "Kofi Mensah",
    "Lena Fischer",
    "Marco Rossi",
    "Nadia Rahman",
    "Oskar Lind",
    "Priya Nair",
    "Quentin Roy",
    "Rosa Alvarez",
    "Sven Olsen",
    "Tariq Aziz",
    "Uma Iyer",
    "Viktor Hale",
    "Wen Zhao",
    "Yara Haddad",
]
SERVICES = [
    "billing",
    "search",
    "checkout",
    "auth",
    "notifications",
    "reporting",
    "ingest",
    "payments",
    "inventory",
    "analytics",
    "gateway",
    "scheduler",
    "exports",
    "onboarding",
]
TECH = [
    "PostgreSQL",
    "Redis",
    "Kafka",
    "SQLite",
    "Elasticsearch",
    "RabbitMQ",
    "S3",
    "DynamoDB",
    "ClickHouse",
    "gRPC",
    "GraphQL",
    "Kubernetes",
    "Nomad",
    "Cloud Run",
]
TOOLS = [
    "Neovim",
    "VS Code",
    "IntelliJ",
    "Emacs",
    "tmux",
    "zsh",
    "ripgrep",
    "Docker",
    "Podman",
    "uv",
    "Poetry",
    "pnpm",
    "Bazel",
    "Zed",
]
CITIES = ["Lisbon", "Berlin", "Nairobi", "Osaka", "Toronto", "Montevideo", "Oslo", "Pune", "Austin", "Lyon"]
TOPICS = [
    "the Q3 roadmap",
    "the on-call rotation",
    "the migration plan",
    "hiring for the platform team",
    "the design review",
    "pricing changes",
    "the security audit",
    "a customer escalation",
    "load testing",
    "the API deprecation",
    "the data retention policy",
    "the mobile release",
]
REASONS = [
    "latency under load was too high",
    "the licence changed",
    "the team already knows it",
    "it halves the hosting bill",
    "backups were unreliable",
    "the vendor dropped support",
    "it simplifies deployments",
    "write amplification was wearing out the disks",
]
SYMPTOMS = [
    "p99 latency tripled",
    "requests timed out",
    "the queue backed up",
    "error rates hit 4%",
    "memory grew until the pods were killed",
    "the disk filled up",
]
CHANGES = [
    "config rollout",
    "schema migration",
    "dependency upgrade",
    "traffic spike",
    "certificate rotation",
    "cache eviction change",
]
FIXES = [
    "rolling back",
    "adding an index",
    "raising the connection pool size",
    "pinning the client version",
    "sharding the table",
    "retrying with backoff",
]
ACTIVITIES = ["code review", "writing docs", "debugging", "local development", "note taking", "deployments"]
HOBBIES = [
    "runs marathons",
    "plays the cello",
    "keeps bees",
    "climbs on weekends",
    "bakes sourdough",
    "restores old bikes",
]
RELATIONS = ["sister", "brother", "partner", "manager", "mentor", "daughter", "son"]
PREFS = ["prefers", "dislikes", "always uses", "wants the team to use", "switched to"]
PROJECTS = [
    ("acme-web", 5),
    ("billing-core", 4),
    ("personal", 3),
    ("data-platform", 3),
    ("mobile-app", 2),
    ("infra", 2),
    ("research", 1),
    ("support", 1),
]
MAIN = [
    "{p} decided to move {s} from {t} to {t2} because {reason}.",
    "{p} {pref} {tool} for {act}.",
    "Incident on {s} on {date}: {sym} after a {chg}; fixed by {fix}.",
    "Met {p} in {city} to discuss {topic}; {p2} will send the notes.",
    "Deadline: the {s} {t} integration must ship by {date}, owned by {p}.",
    "{p}'s {rel} {first} lives in {city} and {hobby}.",
    "The {s} team agreed to drop {t} and standardise on {t2} from {month}.",
]
EXTRA = [
    "They want a summary before Friday.",
    "Follow up with {p2} next week.",
    "This was agreed in the meeting about {topic}.",
    "Ticket {ticket} tracks it.",
    "It also affects the {s} dashboard.",
    "The numbers are in the {month} report.",
    "{p2} disagreed and asked for a benchmark first.",
    "Budget impact is about {n}k per year.",
]
QUESTIONS = [
    "Why did we move {s} off {t}?",
    "Which tool does {p} prefer for {act}?",
    "What went wrong in the {s} incident?",
    "When is the {s} deadline and who owns it?",
    "Who did I meet in {city}?",
    "What did we decide about {topic}?",
    "Where does {p}'s {rel} live?",
    "What does the {s} team standardise on?",
]
START = datetime(2022, 1, 1, tzinfo=UTC)
SPAN_SECONDS = int(timedelta(days=1275).total_seconds())


@dataclass(frozen=True)
class Item:
    content: str
    project: str
    occurred_at: datetime


@dataclass(frozen=True)
class Query:
    text: str
    project: str
    # Which of QUESTIONS it was made from, and the values it was filled with: what ``relevant``
    # judges a memory by.
    template: int = -1
    slots: tuple[tuple[str, str], ...] = ()


# Preferences that answer "Which tool does P prefer for A?" ("dislikes" does not).
PREFERS = ("prefers", "always uses", "wants the team to use", "switched to")


def relevant(query: Query, content: str) -> bool:
    """Whether a memory of the corpus answers ``query``: it was made from the memory template the
    question asks about, with the question's values (its project is the question's: recall searches
    only that one). Judged from the text, so a store built by any earlier run is judged alike."""
    v = dict(query.slots)
    first = content.split(". ", 1)[0].removesuffix(".")  # the template's own sentence
    match query.template:
        case 0:  # Why did we move S off T?
            return f" decided to move {v['s']} from {v['t']} to " in first
        case 1:  # Which tool does P prefer for A?
            return any(first.startswith(f"{v['p']} {w} ") for w in PREFERS) and first.endswith(
                f" for {v['act']}"
            )
        case 2:  # What went wrong in the S incident?
            return content.startswith(f"Incident on {v['s']} on ")
        case 3:  # When is the S deadline and who owns it?
            return content.startswith(f"Deadline: the {v['s']} ")
        case 4:  # Who did I meet in C?
            return content.startswith("Met ") and f" in {v['city']} to discuss " in first
        case 5:  # What did we decide about T?
            return (
                f" to discuss {v['topic']};" in first
                or f" agreed in the meeting about {v['topic']}." in content
            )
        case 6:  # Where does P's R live?
            return content.startswith(f"{v['p']}'s {v['rel']} ")
        case 7:  # What does the S team standardise on?
            return content.startswith(f"The {v['s']} team agreed to drop ")
    raise ValueError(f"a question of no known template: {query.text!r}")


class Corpus:
    """Deterministic streams of memories and questions for one seed."""

    def __init__(self, seed: int = 7) -> None:
        self.seed = seed
        self._items = random.Random(seed)
        self._queries = random.Random(seed + 1)
        names, weights = zip(*PROJECTS, strict=True)
        self.projects, self._weights = list(names), list(weights)

    def _fill(self, rng: random.Random, template: str) -> str:
        return template.format(**self._slots(rng))

    @staticmethod
    def _slots(rng: random.Random) -> dict[str, str]:
        """One draw of every value a template may name (the same draws, in the same order, whatever
        the template: the streams stay as they were)."""
        p, p2 = rng.sample(PEOPLE, 2)
        t, t2 = rng.sample(TECH, 2)
        when = START + timedelta(seconds=rng.randrange(SPAN_SECONDS))
        return dict(
            p=p,
            p2=p2,
            first=rng.choice(PEOPLE).split()[0],
            s=rng.choice(SERVICES),
            t=t,
            t2=t2,
            tool=rng.choice(TOOLS),
            act=rng.choice(ACTIVITIES),
            pref=rng.choice(PREFS),
            city=rng.choice(CITIES),
            topic=rng.choice(TOPICS),
            reason=rng.choice(REASONS),
            sym=rng.choice(SYMPTOMS),
            chg=rng.choice(CHANGES),
            fix=rng.choice(FIXES),
            rel=rng.choice(RELATIONS),
            hobby=rng.choice(HOBBIES),
            date=when.strftime("%-d %B %Y"),
            month=when.strftime("%B"),
            ticket=f"OPS-{rng.randrange(100, 9999)}",
            n=str(rng.randrange(2, 90)),
        )

    def _project(self, rng: random.Random) -> str:
        return rng.choices(self.projects, weights=self._weights)[0]

    def take(self, n: int) -> list[Item]:
        """The next ``n`` memories of the stream."""
        rng, out = self._items, []
        for _ in range(n):
            parts = [self._fill(rng, rng.choice(MAIN))]
            parts += [self._fill(rng, rng.choice(EXTRA)) for _ in range(rng.choice((0, 0, 1, 1, 2, 3)))]
            when = START + timedelta(seconds=rng.randrange(SPAN_SECONDS))
            out.append(Item(content=" ".join(parts), project=self._project(rng), occurred_at=when))
        return out

    def questions(self, n: int) -> list[Query]:
        rng = self._queries
        out = []
        for _ in range(n):
            template = rng.choice(QUESTIONS)
            slots = self._slots(rng)
            named = tuple(sorted((k, v) for k, v in slots.items() if "{" + k + "}" in template))
            out.append(Query(template.format(**slots), self._project(rng), QUESTIONS.index(template), named))
        return out
