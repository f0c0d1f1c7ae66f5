"""``controller.ports.Queue`` on SQS (boto3): long-polling receives of up to 10 messages, with
their ``ApproximateReceiveCount`` and ``SentTimestamp``; deletes; visibility changes. Calls run
in ``AwsCalls``'s pool."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from graceguard.adapters.aws import clients
from graceguard.controller import ports


class SqsQueue:
    def __init__(self, calls: clients.AwsCalls, *, url: str) -> None:
        self._calls = calls
        self._client: Any = calls.client("sqs")
        self.url = url

    async def receive(
        self, *, max_messages: int, wait_seconds: int, visibility_seconds: int
    ) -> Sequence[ports.QueueMessage]:
        answer = await self._calls.run(
            self._client.receive_message,
            QueueUrl=self.url,
            MaxNumberOfMessages=max_messages,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=visibility_seconds,
            MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
        )
        found = []
        for m in answer.get("Messages", []):
            attributes = m.get("Attributes", {})
            count = attributes.get("ApproximateReceiveCount", "1")
            found.append(
                ports.QueueMessage(
                    id=str(m.get("MessageId", "")),
                    body=str(m.get("Body", "")),
                    receipt=str(m["ReceiptHandle"]),
                    receive_count=int(count) if str(count).isdigit() else 1,
                    sent=_epoch_millis(attributes.get("SentTimestamp")),
                )
            )
        return found

    async def delete(self, *, receipt: str) -> None:
        await self._calls.run(self._client.delete_message, QueueUrl=self.url, ReceiptHandle=receipt)

    async def extend(self, *, receipt: str, seconds: int) -> None:
        await self._calls.run(
            self._client.change_message_visibility,
            QueueUrl=self.url,
            ReceiptHandle=receipt,
            VisibilityTimeout=seconds,
        )


def _epoch_millis(value: object) -> dt.datetime | None:
    """SQS's ``SentTimestamp``: milliseconds since the epoch, as a string; ``None`` if absent."""
    text = str(value) if value is not None else ""
    return dt.datetime.fromtimestamp(int(text) / 1000, dt.UTC) if text.isdigit() else None
