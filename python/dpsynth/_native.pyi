"""Type stubs of the Rust extension (python/src/lib.rs). Use the functions of the dpsynth package."""

import os
from typing import Any, Callable, List, Optional, Tuple, Union

__version__: str

Progress = Callable[[str, str, int, str], None]

class PrivacyError(ValueError):
    """A request that would break the privacy guarantee."""

class ArrowStream:
    """A table to take once through the Arrow PyCapsule interface (``pyarrow.table(stream)``)."""

    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...

class Release:
    """A fitted release: sampling it reads no data and spends no budget."""

    def report(self) -> str: ...
    def diagnostics(self) -> str: ...
    def sample(self, rows: Optional[int] = None, on_progress: Optional[Progress] = None) -> Tuple[ArrowStream, str]: ...
    def save(self, path: Union[str, "os.PathLike[str]"]) -> None: ...

def load(path: Union[str, "os.PathLike[str]"], seed: Optional[int] = None) -> Release: ...
def fit(data: Any, name: str, words: List[str], on_progress: Optional[Progress] = None) -> Release: ...
def synthesize(
    data: Any, name: str, words: List[str], on_progress: Optional[Progress] = None
) -> Tuple[ArrowStream, str, str]: ...
def evaluate(
    real: Any,
    real_name: str,
    synths: List[Any],
    synth_names: List[str],
    words: List[str],
    on_progress: Optional[Progress] = None,
) -> str: ...
