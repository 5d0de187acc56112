"""``python -m course_utils.data [FOLDER]``: download every file the course reads, so that its chapters run offline."""

import sys

from .download import main

sys.exit(main())
