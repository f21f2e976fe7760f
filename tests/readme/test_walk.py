"""The README walk itself, on a README made for the test: a failing block fails with its command and
output, a marker's skip carries its reason, a background command is ready when it prints what its
marker says and is stopped at the end of its section, a block whose program the machine lacks skips
(and the rest of its section with it), and a file the blocks write that .gitignore
does not ignore fails the clean-checkout check."""

from __future__ import annotations

from tests.readme.test_readme import run_walk

README = '''# A made-up README

## Passing

```sh
mkdir -p data && echo kept > data/kept.txt
```

`secure.properties`:

```properties
listeners=PLAINTEXT://127.0.0.1:9092
```

```sh
grep -q 9092 secure.properties
```

<!-- readme-test: until "listening" -->
```sh
bash -c 'trap "exit 0" INT; echo listening; while :; do sleep 0.1; done'
```

## Failing

```sh
echo written > stray.txt
echo the output; false
```

<!-- readme-test: skip: a placeholder host -->
```sh
false
```

```
a diagram: not run
```

## Missing

```sh
no-such-program-anywhere --flag
```

```sh
echo builds on the block before
```
'''


def test_the_walk_reports_each_block_and_what_it_left_behind(tmp_path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README)
    results, log = run_walk(tmp_path / "results.jsonl", slow=False, readme=readme)
    assert [results[i]["outcome"] for i in range(4)] == ["passed"] * 4, (results, log)
    assert results[4]["outcome"] == "failed"
    assert "exit 1" in results[4]["output"] and "the output" in results[4]["output"]
    assert results[5] == {"outcome": "skipped", "reason": "a placeholder host", "seconds": 0.0}
    assert 6 not in results  # text
    assert results[-1]["outcome"] == "failed"
    assert "stray.txt" in results[-1]["output"]
    assert results[7]["outcome"] == "skipped"
    assert results[7]["reason"] == "needs no-such-program-anywhere, which this machine does not have"
    assert results[8]["outcome"] == "skipped" and "an earlier block of this section" in results[8]["reason"]
    assert "secure.properties" not in results[-1]["output"] and "data" not in results[-1]["output"]
