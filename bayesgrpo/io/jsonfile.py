"""One base for the package's JSON-file models -- the shipped layers and priors (calibration, p_gain map,
outlook, shape, population prior): save atomically, load with a one-line error naming the file, and the
packaged copy from ``bayesgrpo/resources``. Each model keeps only what is its own (fields, validation, use)."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import ClassVar, Self

from pydantic import BaseModel, ValidationError

from bayesgrpo.errors import OptionError
from bayesgrpo.io.output import write_text

__all__ = ["JsonFile"]


class JsonFile(BaseModel):
    """A pydantic model stored as one JSON file (module docstring)."""

    #: what the file is, in error messages ("population prior", "outlook", ...)
    file_label: ClassVar[str] = "file"
    #: the exception an unreadable or invalid file raises (a :class:`bayesgrpo.errors.BayesGRPOError`)
    file_error: ClassVar[type[Exception]] = OptionError
    #: appended to the message of a file that cannot be read (what to do)
    file_hint: ClassVar[str] = ""

    def save(self, path) -> None:
        """Write the model as indented JSON, atomically (a failed write leaves no file behind)."""
        write_text(path, self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path) -> Self:
        """Read a file written by :meth:`save` (a path or an ``importlib.resources`` traversable).

        Raises
        ------
        file_error
            The file cannot be read or is not a valid file of this model (one line naming it).
        """
        p = path if hasattr(path, "read_text") else Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise cls.file_error(f"{cls.file_label} {p}: cannot be read ({type(e).__name__}){cls.file_hint}") from None
        try:
            return cls.model_validate(json.loads(text))
        except (json.JSONDecodeError, ValidationError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise cls.file_error(f"{cls.file_label} {p}: not a valid {cls.file_label} file ({first})") from None

    @classmethod
    def packaged(cls, name: str) -> Self | None:
        """The packaged copy ``bayesgrpo/resources/<name>``, or None when the package ships none."""
        res = files("bayesgrpo.resources").joinpath(name)
        return cls.load(res) if res.is_file() else None
