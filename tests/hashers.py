"""The password hasher of the test session: Django's PBKDF2-SHA256 at one iteration.

Its hashes keep the algorithm name ``pbkdf2_sha256`` and carry their iteration count, so the
stock hasher of a worker, web server or ``./rlt up`` started by a test checks them as it checks its
own. The suite creates and logs in hundreds of users; at the production count each costs about half
a second of CPU and proves nothing the one-iteration hash does not.
"""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneIterationPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
