"""``python -m course_utils.data [FOLDER]``: download every file the course reads, so that its chapters run offline."""

import sys

from .download import main

if __name__ == "__main__":  # importing it (the API's tests walk every module) downloads nothing
    sys.exit(main())
