"""The package version is looked up on every call (spec A.9): a changed or removed metadata file is
seen by the next call."""

from importlib import metadata

from torchscan_lsp import version


def test_the_metadata_file_is_read_on_every_call(tmp_path, monkeypatch):
    installed = metadata.version(version.PACKAGE_NAME)
    assert version.package_version() == installed
    fake = tmp_path / "METADATA"
    fake.write_text("Metadata-Version: 2.1\nName: torchscan-lsp\nVersion: 9.9.9\n\nBody\n")
    monkeypatch.setattr(version, "_LOCATION", [str(fake)])
    assert version.package_version() == "9.9.9"
    fake.write_text("Metadata-Version: 2.1\nName: torchscan-lsp\nVersion: 10.0\n")  # upgraded in place
    assert version.package_version() == "10.0"
    fake.unlink()  # an upgrade removed it: the next call looks the distribution up again
    assert version.package_version() == installed
