"""Draws the VS Code extension's icon (editor-integrations/vscode/images/icon.png).

Three drafts fanning out of one cursor: k completions from one Superposed
Decoding pass. Re-run after a change: `.venv/bin/python scripts/make-vscode-icon.py`.
"""

from pathlib import Path

from PIL import Image, ImageDraw

SIZE = 256  # drawn at 2x, saved at 128 x 128 (the Marketplace's minimum)
OUT = Path(__file__).resolve().parent.parent / "editor-integrations" / "vscode" / "images" / "icon.png"


def main() -> None:
    image = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((8, 8, SIZE - 8, SIZE - 8), radius=48, fill=(30, 34, 48, 255))
    # The typed prefix: one solid bar, then the cursor.
    draw.rounded_rectangle((40, 70, 118, 94), radius=12, fill=(220, 224, 235, 255))
    draw.rectangle((126, 58, 134, 106), fill=(255, 196, 64, 255))
    # Three drafts, fading with rank, fanning out from the cursor.
    for rank, (y, width) in enumerate([(70, 84), (126, 64), (182, 44)]):
        alpha = 235 - rank * 70
        draw.line((134, 82, 150, y + 12), fill=(255, 196, 64, alpha), width=6)
        draw.rounded_rectangle((150, y, 150 + width, y + 24), radius=12, fill=(120, 170, 255, alpha))
    image.resize((128, 128), Image.LANCZOS).save(OUT)


if __name__ == "__main__":
    main()
