"""Real-looking code prefixes shared by the end-to-end tests."""

WALK_HEAD = (
    "import os\n\n"
    "def list_python_files(root):\n"
    '    """Return every .py file below root."""\n'
    "    result = []\n"
    "    for dirpath, dirnames, filenames in os.walk(root):\n"
    "        for name in filenames:\n"
)
