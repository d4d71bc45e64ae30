"""kombu's filesystem transport, with each message written whole before a consumer can see it.

kombu's own ``_put`` opens the message file under its final name in the queue folder and then
writes it; a worker polling the folder can move and read the file in between, find it empty, and
stop with a ``JSONDecodeError`` while the message is lost. With beat embedded in the worker
(``./rlt up``), the sweep is sent into that folder every ``RLT_SWEEP_S`` from the worker's own
process, and this happened within a minute. Here the message is written under a name no consumer
picks up (it does not end in ``.<queue>.msg``) and renamed to its final name, which is atomic.

``register()`` makes ``filesystem://`` mean this transport in the calling process; ``config.celery``
calls it, so the web process, workers, beat and commands all send and read this way.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: written to a hidden name, then renamed into the queue."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.partial")
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel


def register() -> None:
    TRANSPORT_ALIASES["filesystem"] = f"{__name__}:Transport"
