"""Files this package writes and the netCDF files it reads: the one atomic writer every
output goes through, netCDF serialisation, and the checks made on a file before it is
opened (not a regular file; a netCDF that would read other files or inflate past a limit).

A module of the lowest layer (standard library, NumPy, xarray and h5py only), so that every
layer writes and checks files the same way: :mod:`saturation.io` re-exports these names,
and the fit objects save themselves through them (:mod:`saturation.models.persist`).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import tempfile
from os import PathLike
from pathlib import Path
from typing import Any

import h5py
import xarray as xr

PathArg = str | PathLike[str]


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip().isdigit() else default


def not_regular(path: PathArg) -> str:
    """Why ``path`` cannot be read as a file (a dangling symbolic link, such as an unfetched
    git-annex file; a FIFO, which would block the reader forever; a device or a socket),
    or ``""`` for a regular file. Only ``stat`` is called: the file is never opened."""
    path = Path(path)
    try:
        mode = path.stat().st_mode  # follows symbolic links
    except FileNotFoundError:
        if path.is_symlink():
            return "a dangling symbolic link (an unfetched git-annex file?); not read"
        return "no such file; not read"
    except OSError as exc:
        return f"{exc.strerror or exc}; not read"
    if stat.S_ISREG(mode):
        return ""
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    return f"{kind}; never opened"


#: the process's umask (read once): a written file gets the mode a plain ``open`` would give it
_UMASK = os.umask(0)
os.umask(_UMASK)


def inside(path: PathArg, root: PathArg) -> bool:
    """Whether ``path`` lies inside ``root`` (or is it) once symbolic links are resolved."""
    target, base = Path(path).resolve(), Path(root).resolve()
    return target == base or base in target.parents


def _write_payload(file: Any, payload: bytes, target: Path) -> None:
    """Write ``payload`` to ``file``, the open temporary file of ``target`` (the one place
    every output's bytes are written, so tests can inject faults here)."""
    file.write(payload)


def write_atomic(path: PathArg, data: bytes | str) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` atomically.

    The bytes go to a new temporary file beside ``path`` (created by
    :func:`tempfile.mkstemp`: a fresh random name opened with ``O_CREAT | O_EXCL |
    O_NOFOLLOW``, so a symbolic link or file planted at a predictable name is never
    followed or reused), which is then renamed over ``path``: readers see the old file or
    the new one, never half of either. A ``path`` that is a symbolic link is refused (an
    ``OSError``): the link's target is not this command's file, and replacing the link
    would silently move the output somewhere its owner did not point it. A failed write
    (full disk, no permission, an interrupt) leaves the previous file, if any, as it was
    and removes the temporary file.

    Parameters
    ----------
    path : path
        File to write (replaced if it exists and is not a symbolic link); its directory
        must exist.
    data : bytes or str
        Content; a ``str`` is encoded as UTF-8.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OSError
        If the file cannot be written, or ``path`` is a symbolic link.
    """
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    link = OSError(errno.EEXIST, f"could not write {path}: it is a symbolic link (not replaced; remove it first)")
    if path.is_symlink():
        raise link
    tmp: Path | None = None
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        tmp = Path(name)
        with os.fdopen(fd, "wb") as file:
            os.fchmod(file.fileno(), 0o666 & ~_UMASK)
            _write_payload(file, payload, path)
        if path.is_symlink():  # planted while we wrote
            raise link
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        if exc is link:
            raise
        raise OSError(exc.errno, f"could not write {path}: {exc.strerror or exc}") from exc
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    return path


def netcdf_bytes(obj: xr.Dataset | Any) -> bytes:
    """A Dataset or an ArviZ InferenceData as netCDF4 (h5netcdf) bytes.

    Serialised in memory, so the file system sees one plain write (:func:`write_atomic`):
    HDF5 failing mid-file on a full disk leaves half-open handles (and can crash the
    interpreter at exit); a failed plain write is a clean ``OSError``. The cost is one
    copy of the file in memory.

    Parameters
    ----------
    obj : xarray.Dataset or arviz.InferenceData
        What to serialise; an InferenceData is written as its groups' DataTree.

    Returns
    -------
    bytes
        The netCDF4 file's content.
    """
    buf = io.BytesIO()
    with _local_write_lock():
        if isinstance(obj, xr.Dataset):
            obj.to_netcdf(buf, engine="h5netcdf")
        else:  # InferenceData: its groups as a DataTree (``az.from_netcdf`` reads it back)
            obj.to_datatree().to_netcdf(buf, engine="h5netcdf")
    return buf.getvalue()


def _local_write_lock() -> contextlib.AbstractContextManager[Any]:
    """Inside a dask worker xarray takes a cluster-wide lock named after the target, which
    fails for an in-memory buffer; a buffer is private to this process, so the local
    (threaded) lock is the right one."""
    try:
        import dask
    except ImportError:  # pragma: no cover - dask is a dependency
        return contextlib.nullcontext()
    return dask.config.set(scheduler="synchronous")


def write_netcdf(obj: xr.Dataset | Any, path: PathArg) -> Path:
    """Write a Dataset or an InferenceData to netCDF atomically (:func:`netcdf_bytes`,
    :func:`write_atomic`).

    Parameters
    ----------
    obj : xarray.Dataset or arviz.InferenceData
        What to write.
    path : path
        Target file (conventionally ``.nc``); replaced if it exists.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OSError
        If the file cannot be written.
    """
    return write_atomic(path, netcdf_bytes(obj))


#: bytes a netCDF input may hold once decompressed (the sum of its variables' sizes, read
#: from the header before any data): 2 GiB unless ``SATURATION_MAX_NETCDF_BYTES`` sets it
MAX_NETCDF_BYTES = _env_int("SATURATION_MAX_NETCDF_BYTES", 2 << 30)


def _hdf5_problems(f: Any) -> tuple[list[str], int]:
    """What an HDF5 file holds that a netCDF input must not: links (external ones open
    another file, soft ones another object), datasets stored in other files (external raw
    storage) or assembled from them (virtual datasets). Returns (problems, the bytes its
    datasets hold once decompressed)."""
    problems: list[str] = []
    total = 0

    def visit(name: str, link: Any) -> None:
        nonlocal total
        if isinstance(link, h5py.ExternalLink):
            problems.append(f"'{name}' is a link into another file ({link.filename!r}, object {link.path!r})")
        elif isinstance(link, h5py.SoftLink):
            problems.append(f"'{name}' is a soft link (to {link.path!r})")
        elif isinstance(obj := f.get(name), h5py.Dataset):
            if obj.is_virtual:
                files = sorted({str(s.file_name) for s in obj.virtual_sources()})
                problems.append(f"variable '{name}' is a virtual dataset assembled from {files}")
            elif obj.external:
                problems.append(f"variable '{name}' is stored in another file ({str(obj.external[0][0])!r})")
            total += int(obj.size) * int(obj.dtype.itemsize)

    f.visititems_links(visit)
    return problems, total


def check_netcdf(path: PathArg, *, limit: int | None = None) -> None:
    """Refuse a netCDF input that would read other files or inflate past the limit, before
    any of its data is read: only the HDF5 header is looked at.

    Parameters
    ----------
    path : path
        The netCDF4 (HDF5) file.
    limit : int, optional
        Bytes its variables may hold decompressed (default :data:`MAX_NETCDF_BYTES`).

    Raises
    ------
    ValueError
        Naming the file and the variable: not a regular file, not an HDF5 file, an external
        or soft link, a variable stored in (or assembled from) another file, or more than
        ``limit`` bytes once decompressed.
    """
    path = Path(path)
    why = not_regular(path)
    if why:
        raise ValueError(f"{path}: {why}")
    limit = MAX_NETCDF_BYTES if limit is None else limit
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise ValueError(f"{path}: not a netCDF4 (HDF5) file ({exc})") from None
    with f:
        problems, total = _hdf5_problems(f)
    if problems:
        raise ValueError(f"{path}: refused, it would read other files: " + "; ".join(problems))
    if total > limit:
        raise ValueError(
            f"{path}: its variables hold {total:,} bytes once decompressed, more than the limit of {limit:,} "
            "(raise it with SATURATION_MAX_NETCDF_BYTES)"
        )
