"""The console of a real `bt-exec run FILE --web PORT`: when the command ends its run and closes on purpose the
page says so and lets go; when the server dies without a word, the page reconnects."""
import signal

from console_page import Console
from test_cli_web import RunCommand

from bt_exec.web.client import HttpApi


def test_the_page_says_the_run_ended_when_the_command_closes_and_reconnects_when_a_server_dies(driver, tmp_path):
    run = RunCommand(tmp_path, "--pause-at", "3:on_enter")
    try:
        run.wait_line("plan 1 paused at op 3")
        console = Console(None, None, driver, run.url)
        console.open()
        console.wait_text("#connection", "live")
        console.wait_text("#status", "paused")
        assert HttpApi(run.url).call("resume_plan", {"plan_id": "1"})["resumed"]
        console.wait_text("#status", "succeeded")
        console.wait_text("#connection", "bt-exec run ended")  # the command closed once its page had loaded
        assert run.finish() and run.process.returncode == 0
        console.wait_text("#messages", "The server closed (bt-exec run ended)")
        assert driver.execute_script("return document.querySelector('#connection').textContent") \
            == "■ bt-exec run ended"
        assert not console.css('[data-action="cancel-all"]').is_enabled()
    finally:
        run.process.kill()

    # A server gone without its server_closing event (killed): the stream broke, and the page tries again.
    serving = RunCommand(tmp_path, "--keep-serving")
    try:
        serving.wait_line("still serving")
        console.url = serving.url
        console.open()
        console.wait_text("#connection", "live")
        serving.process.send_signal(signal.SIGKILL)
        serving.process.wait()
        console.wait_text("#connection", "reconnecting")
    finally:
        serving.process.kill()
        driver.get("about:blank")
    assert not console.page_errors()
