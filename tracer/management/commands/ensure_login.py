from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the dashboard login if it does not exist and print its generated password once."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, **opts):
        User = get_user_model()
        username = opts["username"]
        if User.objects.filter(username=username).exists():
            self.stdout.write(
                f"dashboard login: {username} (its password was printed when it was created; "
                f"to set a new one: python manage.py changepassword {username})"
            )
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(f"dashboard login created: user {username}  password {password}")
        self.stdout.write("(printed only now; it is stored only as a hash in the database)")
