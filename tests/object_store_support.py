"""A real S3 endpoint for the object-store tests: moto's S3 server, started on 127.0.0.1 on a
free port in a thread of the test process, with one bucket; s3fs reaches it through
``storage_options`` (``endpoint_url``, ``key``, ``secret``) as it would reach AWS."""

from __future__ import annotations

import contextlib
import logging
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class S3Server:
    """The running server: where it listens, the bucket, and the options that reach it."""

    endpoint: str
    bucket: str
    key: str
    secret: str

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint, "key": self.key, "secret": self.secret}

    def filesystem(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)

    def upload(self, folder: Path, prefix: str) -> str:
        """Every file under ``folder`` to ``s3://<bucket>/<prefix>/`` (same relative paths);
        returns that URL."""
        fs = self.filesystem()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            fs.put_file(str(path), f"{self.bucket}/{prefix}/{path.relative_to(folder).as_posix()}")
        return f"s3://{self.bucket}/{prefix}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    """moto's ThreadedMotoServer on a free port with one bucket (stopped on exit)."""
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    import boto3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        info = S3Server(
            endpoint=f"http://127.0.0.1:{port}",
            bucket="fairness-lake",
            key=f"AKID{uuid.uuid4().hex[:16].upper()}",
            secret=f"SECRET-{uuid.uuid4().hex}",
        )
        boto3.client(
            "s3",
            endpoint_url=info.endpoint,
            aws_access_key_id=info.key,
            aws_secret_access_key=info.secret,
            region_name="us-east-1",
        ).create_bucket(Bucket=info.bucket)
        yield info
    finally:
        server.stop()
