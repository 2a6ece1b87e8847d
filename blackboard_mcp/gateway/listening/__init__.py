"""Change notifications: one change-log reader per active workspace, and the listens
(``subscriptions/listen``, on the SDK's path and written straight to the response) that hear it."""

from ._hub import IDLE, ChangeHub
from ._stream import DirectListen
from ._subscriptions import BoardListen, Listens

__all__ = ["IDLE", "BoardListen", "ChangeHub", "DirectListen", "Listens"]
