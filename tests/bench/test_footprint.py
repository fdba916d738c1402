"""``memlane bench footprint``'s report: the install's one figure (on disk, as a user's `du` sees
a fresh venv after `pip install .`) beside the bytes of its files and the LLM SDKs' share."""

from __future__ import annotations


def test_the_footprint_report_gives_the_install_on_disk_as_its_one_figure():
    from memlane.bench import footprint

    install = {
        "disk_mb": 493.0,
        "site_packages_mb": 431.3,
        "without_venv_tools_mb": 410.0,
        "llm_sdks_mb": {"anthropic": 16.9, "openai": 17.4},
        "largest": {"onnxruntime": 76.4},
        "torch_importable": False,
        "pip_install_s": 60.9,
    }
    resident = {
        "what": "x",
        "turns": 1,
        "questions": 1,
        "pss_mb": 1,
        "processes": 2,
        "rss_mb": 2,
        "server_rss_mb": 1,
    }
    text = footprint.markdown({"resident": resident, "install": install})
    assert "**493.0 MB** of site-packages on disk" in text
    assert "431.3 MB of file contents" in text and "410.0 MB without the venv's own pip" in text
    assert "anthropic 16.9 + openai 17.4 MB" in text
    older = footprint.markdown(
        {
            "resident": resident,
            "install": {k: install[k] for k in ("site_packages_mb", "largest", "torch_importable")},
        }
    )
    assert "**431.3 MB** of site-packages" in older
