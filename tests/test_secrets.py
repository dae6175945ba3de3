"""No credential in any message: upstream and database URLs redacted wherever a location
is printed (banner, errors, ``repr``, 502 bodies), in any case and with any character
in the password, and a URL never taken as a folder."""

from __future__ import annotations

import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from glyphpack import StoreError, Workspace
from glyphpack._secrets import redacted, scrubbed, secrets_of

#: Passwords as people write them: any printable character but the ones that end a URL's
#: authority before its ``@`` could (then nothing in it reads as a password at all).
_passwords = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), exclude_characters="?"), min_size=4, max_size=24)


@given(password=_passwords, scheme=st.sampled_from(["postgresql", "POSTGRESQL", "postgres", "http", "https", "HTTPS"]))
def test_a_password_never_survives_redaction_whatever_its_characters(password: str, scheme: str) -> None:
    for url in (f"{scheme}://me:{password}@db.example:5432/work", f"{scheme}://me:{urllib.parse.quote(password, safe='')}@db.example/work"):
        shown = redacted(url)
        assert password not in shown and urllib.parse.quote(password, safe="") not in shown
        assert shown.startswith(f"{scheme}://me:***@")
        assert password not in scrubbed(f"could not parse {url!r}: bad token {password!r}", url)


@given(secret=st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=4, max_size=30),
       name=st.sampled_from(["key", "KEY", "password", "api_key", "token", "sslpassword"]))
def test_credential_query_parameters_are_hidden(secret: str, name: str) -> None:
    url = f"https://gateway.example/v1?model=x&{name}={secret}&region=eu"
    assert redacted(url) == f"https://gateway.example/v1?model=x&{name}=***&region=eu"
    assert secret in secrets_of(url)


def test_what_a_url_shows() -> None:
    assert redacted("http://user:PASSWORD@host:8080/v1") == "http://user:***@host:8080/v1"
    assert redacted("https://ghp_TOKEN@host/") == "https://***@host/"  # a token given as the user
    assert redacted("postgresql://me@db/x") == "postgresql://me@db/x"  # a database user is no secret
    assert redacted("postgresql://me:p@ss@db/x") == "postgresql://me:***@db/x"  # '@' in the password
    assert redacted("postgresql://me:pa/ss#x@db/x") == "postgresql://me:***@db/x"  # '/' and '#' too
    assert redacted("anthropic") == "anthropic" and redacted("/var/ws") == "/var/ws"
    # A one-letter secret is hidden where it stands alone, not out of every word.
    assert scrubbed("token 'Q' refused by POSTGRESQL at Q.", "postgresql://h/db?password=Q") == "token '***' refused by POSTGRESQL at ***."


def test_the_tail_of_a_password_with_an_at_sign_that_a_driver_took_for_the_host_is_hidden() -> None:
    """A driver that parses at the first '@' quoted the rest back as the host name."""
    url = "postgresql://me:pass@word7@db.example/work"
    echoed = 'could not translate host name "word7@db.example" to address'
    assert scrubbed(echoed, url) == 'could not translate host name "***@db.example" to address'
    assert "word7" not in scrubbed('host "pass" port', url) and "pass" not in scrubbed('host "pass" port', url)


@pytest.mark.parametrize("password", ["p%zz", "p@ss@", "100%", "a b", "pass@word7"])
def test_a_database_password_never_reaches_the_error(password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad percent-escape (the driver quotes the bad token back), an '@' in the password,
    an upper-case scheme: the error names the database, never the password."""
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    for scheme in ("postgresql", "POSTGRESQL"):
        url = f"{scheme}://me:{password}@127.0.0.1:1/work"
        with pytest.raises(StoreError) as error:
            Workspace(url)
        assert password not in str(error.value) and "me:***@127.0.0.1:1/work" in str(error.value)
    assert list(tmp_path.iterdir()) == []  # no folder named after the URL


def test_a_url_that_names_no_database_is_refused_not_made_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("https://me:hunter22@host/ws", "mysql://me:hunter22@host/ws", "sqlite:///ws"):
        with pytest.raises(StoreError, match="is not a workspace: a workspace is a folder or a postgresql:// URL") as error:
            Workspace(url)
        assert "hunter22" not in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_an_upper_case_scheme_opens_the_database(postgres_url: str) -> None:
    scheme, rest = postgres_url.split("://", 1)
    with Workspace(f"{scheme.upper()}://{rest}") as workspace:
        assert workspace.location.startswith("postgresql://") or workspace.location.startswith("POSTGRESQL://")
        assert workspace.transcripts() == []


@pytest.mark.slow  # starts glyphpack in a subprocess
def test_the_cli_names_a_bad_database_in_one_line_without_its_password(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "glyphpack", "tree", "postgresql://me:p%zzsecret@127.0.0.1:1/work"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "zzsecret" not in result.stderr + result.stdout and "me:***@127.0.0.1:1/work" in result.stderr


def test_the_edges_of_a_url_mutation_testing_found():
    # An '@' in the query is no user information; a ':' in the password stays hidden whole.
    assert redacted("https://host/v1?email=a@b.example&x=1") == "https://host/v1?email=a@b.example&x=1"
    assert redacted("postgresql://me:pa:ss@db/x") == "postgresql://me:***@db/x"
    assert redacted("postgres://me@db/x") == "postgres://me@db/x"  # either spelling names a database user
    # A key whose value holds '=' (base64 padding) is hidden whole.
    assert redacted("https://h/v1?key=abc==") == "https://h/v1?key=***"
    assert "abc==" in secrets_of("https://h/v1?key=abc==")
    # A token given as a web URL's user is a secret; a database user name is not.
    assert scrubbed("refused for ghp_TOKEN42 at the gateway", "https://ghp_TOKEN42@host/") == "refused for *** at the gateway"
    assert scrubbed("role me does not exist", "postgresql://me@db/x") == "role me does not exist"
    # Another URL quoted in the error is redacted too, not only the one given.
    assert scrubbed("redirected to http://u:pw2secret@other:5/x", "http://a:b@host") == "redirected to http://u:***@other:5/x"
