"""Writes mentions.jsonl: the bundled SAMPLE of social mentions (made-up accounts and posts, not live data).

Deterministic from a seed: 90 accounts on the 'sample' source post links to the sample papers over 7 days, with a
few popular papers, reposts and likes, and one bot-like account ('sample-bot.example') posting the same links again
and again (put it in the hub's bots.txt to see it stop counting). ``paperzoo hub ingest mentions --sample`` shifts
the times to end now. Run: python -m paperzoo.hub.sample.mentions
"""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from .papers import PAPERS

END = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def main(seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    ids = [p[0] for p in PAPERS]
    popularity = 1.0 / np.arange(1, len(ids) + 1) ** 0.9  # Zipf-like: a few papers get most of the talk
    popularity = popularity[rng.permutation(len(ids))]
    popularity /= popularity.sum()
    out = Path(__file__).with_name("mentions.jsonl")
    with out.open("w") as f:
        for n in range(600):
            paper = ids[rng.choice(len(ids), p=popularity)]
            account = f"sample-reader-{rng.integers(90):02d}.example"
            t = END - timedelta(hours=float(rng.uniform(0, 7 * 24)))
            link = rng.choice([f"https://arxiv.org/abs/{paper}v1", f"https://arxiv.org/pdf/{paper}", f"arXiv:{paper}"])
            f.write(json.dumps({"source": "sample", "post_id": f"sample-{n}", "account": account,
                                "posted_at": t.isoformat(), "reposts": int(rng.poisson(1.5)),
                                "likes": int(rng.poisson(6)), "url": "", "text": f"Reading {link} (sample post)"})
                    + "\n")
        for n in range(50):  # one account repeating one link: counts once, or not at all once on the bot list
            t = END - timedelta(hours=n)
            f.write(json.dumps({"source": "sample", "post_id": f"sample-bot-{n}", "account": "sample-bot.example",
                                "posted_at": t.isoformat(), "reposts": 0, "likes": 0, "url": "",
                                "text": f"New: https://arxiv.org/abs/{ids[-2]} (sample post)"}) + "\n")


if __name__ == "__main__":
    main()
