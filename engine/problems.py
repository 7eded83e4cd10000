"""What is wrong with a run's options, said the way the command line spells them.

Below every other engine module (config, strategies and models report problems
and none of this imports them back).
"""
from __future__ import annotations

from dataclasses import dataclass

# Each option's flag where the config declares one (engine.config fills it: it is above this module).
FLAGS: dict[str, str] = {}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config: the option (as the CLI spells it) and what it allows."""
    option: str
    message: str

    def __str__(self) -> str:
        flag = self.option if self.option == "config" else FLAGS.get(self.option, "--" + self.option.replace("_", "-"))
        return f"{flag}: {self.message}"


class ConfigError(ValueError):
    """Every problem found, at once."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
