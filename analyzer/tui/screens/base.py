"""The screens' common base: ``self.capscan`` is the running CapscanApp, typed (Textual types
``self.app`` as any App, so its store, marks and navigation would be unchecked)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.screen import Screen

if TYPE_CHECKING:
    from analyzer.tui.app import CapscanApp


class CapscanScreen(Screen):
    @property
    def capscan(self) -> CapscanApp:
        return cast("CapscanApp", self.app)
