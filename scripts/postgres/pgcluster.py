"""scripts/postgres/cluster.sh from Python (the database tests and
bench/sweep_storage.py): `Cluster(state)` starts the throwaway server and
reads the one line `up` prints; `stop()`/`start()` restart it in place;
`down()` removes it; `sql()` runs SQL as the superuser over its socket."""

import os
import subprocess

CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster.sh")


class Cluster:
    def __init__(self, state):
        self.state = state
        out = subprocess.run([CLUSTER, "up", state], stdout=subprocess.PIPE, text=True, check=True).stdout
        env = dict(kv.split("=", 1) for kv in out.split()[1:])
        self.url, self.passfile, self.bin = env["TG_PG_URL"], env["TG_PG_PASSFILE"], env["TG_PG_BIN"]
        self.sock, self.port, self.ca = env["TG_PG_SOCK"], env["TG_PG_PORT"], env["TG_PG_CA"]
        self.password = open(self.passfile).read().strip().rsplit(":", 1)[1]

    def _run(self, cmd, check=True):
        subprocess.run([CLUSTER, cmd, self.state], check=check, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def stop(self):
        self._run("stop")

    def start(self):
        self._run("start")

    def down(self):
        self._run("down", check=False)

    def sql(self, db, text):
        cmd = [os.path.join(self.bin, "psql"), "-q", "-X", "-h", self.sock, "-p", self.port, "-U", "postgres",
               "-d", db, "-v", "ON_ERROR_STOP=1", "-At", "-c", text]
        return subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout

    def sql_script(self, db, text):
        """Runs a psql script (psql's meta-commands and variables allowed)."""
        cmd = [os.path.join(self.bin, "psql"), "-q", "-X", "-h", self.sock, "-p", self.port, "-U", "postgres",
               "-d", db, "-v", "ON_ERROR_STOP=1", "-At", "-f", "-"]
        return subprocess.run(cmd, input=text, stdout=subprocess.PIPE, text=True, check=True).stdout

    def new_db(self, name, owner="sweeper"):
        """A new database; its URL for the sweeps' role."""
        self.sql("postgres", f"CREATE DATABASE {name} OWNER {owner}")
        return self.url.rsplit("/", 1)[0] + "/" + name

    @staticmethod
    def sqlalchemy(url):
        """The URL as Optuna's RDBStorage (SQLAlchemy with psycopg2) takes it."""
        return url.replace("postgresql://", "postgresql+psycopg2://", 1)
