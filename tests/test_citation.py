# SPDX-License-Identifier: BSD-3-Clause
"""The artifact's metadata at the root: CITATION.cff is valid CFF 1.2.0 (required keys, known keys,
author and reference shapes), cites the AiSIO work with the repository and commit that
data/reference/README.md names as the source of the published records, and agrees with
pyproject.toml and LICENSE on the license and version."""

from __future__ import annotations

import datetime
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Citation File Format 1.2.0 (https://citation-file-format.github.io/): the keys its schema allows.
TOP_REQUIRED = {"cff-version", "message", "title", "authors"}
TOP_KEYS = TOP_REQUIRED | {
    "abstract",
    "commit",
    "contact",
    "date-released",
    "doi",
    "identifiers",
    "keywords",
    "license",
    "license-url",
    "preferred-citation",
    "references",
    "repository",
    "repository-artifact",
    "repository-code",
    "type",
    "url",
    "version",
}
PERSON_KEYS = {
    "address",
    "affiliation",
    "alias",
    "city",
    "country",
    "email",
    "family-names",
    "fax",
    "given-names",
    "name-particle",
    "name-suffix",
    "orcid",
    "post-code",
    "region",
    "tel",
    "website",
}
ENTITY_KEYS = {
    "address",
    "alias",
    "city",
    "country",
    "date-end",
    "date-start",
    "email",
    "fax",
    "location",
    "name",
    "orcid",
    "post-code",
    "region",
    "tel",
    "website",
}
REFERENCE_REQUIRED = {"authors", "title", "type"}
REFERENCE_KEYS = REFERENCE_REQUIRED | {
    "abbreviation",
    "abstract",
    "collection-doi",
    "collection-title",
    "collection-type",
    "commit",
    "conference",
    "contact",
    "copyright",
    "data-type",
    "database",
    "database-provider",
    "date-accessed",
    "date-downloaded",
    "date-published",
    "date-released",
    "department",
    "doi",
    "edition",
    "editors",
    "editors-series",
    "end",
    "entry",
    "filename",
    "format",
    "identifiers",
    "institution",
    "isbn",
    "issn",
    "issue",
    "issue-date",
    "issue-title",
    "journal",
    "keywords",
    "languages",
    "license",
    "license-url",
    "loc-end",
    "loc-start",
    "location",
    "medium",
    "month",
    "nihmsid",
    "notes",
    "number",
    "number-volumes",
    "pages",
    "patent-states",
    "pmcid",
    "publisher",
    "recipients",
    "repository",
    "repository-artifact",
    "repository-code",
    "scope",
    "section",
    "senders",
    "start",
    "status",
    "term",
    "thesis-type",
    "translators",
    "url",
    "version",
    "volume",
    "volume-title",
    "year",
    "year-original",
}
REFERENCE_TYPES = {
    "art",
    "article",
    "audiovisual",
    "bill",
    "blog",
    "book",
    "catalogue",
    "conference",
    "conference-paper",
    "data",
    "database",
    "dictionary",
    "edited-work",
    "encyclopedia",
    "film-broadcast",
    "generic",
    "government-document",
    "grant",
    "hearing",
    "historical-work",
    "legal-case",
    "legal-rule",
    "magazine-article",
    "manual",
    "map",
    "multimedia",
    "music",
    "newspaper-article",
    "pamphlet",
    "patent",
    "personal-communication",
    "proceedings",
    "report",
    "serial",
    "slides",
    "software",
    "software-code",
    "software-container",
    "software-executable",
    "software-virtual-machine",
    "sound-recording",
    "standard",
    "statute",
    "thesis",
    "unpublished",
    "video",
    "website",
}


@pytest.fixture(scope="module")
def cff() -> dict:
    # BaseLoader: every scalar stays a string, as CFF tools read them (a version "1.10" is not 1.1).
    doc = yaml.load((ROOT / "CITATION.cff").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    assert isinstance(doc, dict), "CITATION.cff is not a YAML mapping"
    return doc


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def check_authors(authors, where: str) -> None:
    assert isinstance(authors, list) and authors, f"{where}: authors must be a non-empty list"
    for a in authors:
        assert isinstance(a, dict), f"{where}: an author is a mapping, got {a!r}"
        if "name" in a:  # an entity
            assert a["name"].strip() and set(a) <= ENTITY_KEYS, f"{where}: bad entity {a}"
        else:  # a person
            assert a.get("family-names", "").strip(), f"{where}: a person needs family-names: {a}"
            assert set(a) <= PERSON_KEYS, f"{where}: unknown person keys {set(a) - PERSON_KEYS}"


def test_required_and_known_keys(cff):
    assert cff["cff-version"] == "1.2.0"
    missing = TOP_REQUIRED - {k for k, v in cff.items() if v}
    assert not missing, f"CITATION.cff lacks {sorted(missing)}"
    assert set(cff) <= TOP_KEYS, f"keys CFF 1.2.0 does not know: {sorted(set(cff) - TOP_KEYS)}"
    assert cff.get("type", "software") in {"software", "dataset"}
    check_authors(cff["authors"], "CITATION.cff")
    if "date-released" in cff:
        datetime.date.fromisoformat(cff["date-released"])
    for ref in cff.get("references", []):
        assert isinstance(ref, dict)
        assert REFERENCE_REQUIRED <= set(ref), f"reference lacks {REFERENCE_REQUIRED - set(ref)}: {ref.get('title')}"
        assert set(ref) <= REFERENCE_KEYS, f"unknown reference keys {set(ref) - REFERENCE_KEYS}"
        assert ref["type"] in REFERENCE_TYPES, ref["type"]
        check_authors(ref["authors"], f"reference {ref['title']!r}")


def test_cites_the_aisio_source_of_the_published_records(cff):
    """The commit and repository are the ones data/reference/README.md gives as the records' source."""
    readme = (ROOT / "data/reference/README.md").read_text(encoding="utf-8")
    m = re.search(r"\*\*(\w+/aisio)\*\*, commit \*\*([0-9a-f]{7,40})\*\*", readme)
    assert m, "data/reference/README.md no longer names the AiSIO repository and commit"
    repo, commit = m.groups()
    refs = [r for r in cff.get("references", []) if "aisio" in r.get("title", "").lower()]
    assert len(refs) == 1, "CITATION.cff must cite the AiSIO work once"
    assert refs[0].get("repository-code") == f"https://github.com/{repo}"
    assert refs[0].get("commit") == commit


def test_license_and_version_agree_with_pyproject(cff, project):
    assert cff.get("license") == project["license"]["text"] == "BSD-3-Clause"
    assert cff.get("version") == project["version"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License")
    assert "the nvmelab authors" in text
    assert "Neither the name of the copyright holder" in text  # clause 3: what makes it 3-clause


def test_changelog_keeps_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## \[Unreleased\]$", text, re.M), "CHANGELOG.md: no '## [Unreleased]' section"
    versions = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})", text, re.M)
    assert versions, "CHANGELOG.md: no released version ('## [X.Y.Z] - YYYY-MM-DD')"
    for _, day in versions:
        datetime.date.fromisoformat(day)
