"""The collection's language is guessed from its commonest words, and only when they single one out."""

from __future__ import annotations

import pytest

from poolrag.sparse.language_detection import FUNCTION_WORDS, detect_language
from poolrag.sparse.words import LANGUAGES
from poolrag.stores.language_prior import LANGUAGE_CODES

SAMPLES = {
    "english": "How do I change the password of my account? You can do it from the settings page.",
    "german": "Wie kann ich das Passwort ändern? Das ist nicht schwer, es wird in den Einstellungen gemacht.",
    "french": "Comment est-ce que je change le mot de passe? Vous pouvez le faire dans les réglages.",
    "italian": "Come posso cambiare la password? Non è difficile, si fa nella pagina delle impostazioni.",
    "spanish": "¿Cómo puedo cambiar la contraseña? No es difícil, se hace en la página de ajustes.",
    "portuguese": "Como eu posso mudar a senha? Não é difícil, isso se faz na página de ajustes.",
    "dutch": "Hoe kan ik het wachtwoord wijzigen? Dat is niet moeilijk, je doet het in de instellingen.",
    "swedish": "Hur kan jag byta lösenordet? Det är inte svårt, du gör det på sidan för inställningar.",
    "finnish": "Miten voin vaihtaa salasanan? Se ei ole vaikeaa, ja sen voi tehdä asetuksista.",
    "russian": "Как мне изменить пароль? Это не сложно, вы можете сделать это на странице настроек.",
}


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_a_few_sentences_name_their_language(language: str) -> None:
    assert detect_language([SAMPLES[language]] * 3) == language


def test_text_without_function_words_names_none() -> None:
    code = ["def area(r): return 3.14159 * r ** 2", "SELECT id FROM users WHERE id = 42"]
    assert detect_language(code) is None
    assert detect_language([]) is None and detect_language(["", "   "]) is None


def test_near_twins_the_function_words_cannot_tell_apart_name_none() -> None:
    danish = "Hvordan kan jeg ændre adgangskoden? Det er ikke svært, du gør det på siden med indstillinger."
    assert detect_language([danish] * 3) is None  # Danish and Norwegian share nearly every word counted


def test_every_language_it_names_is_one_the_analyzer_and_the_collection_record_know() -> None:
    assert set(FUNCTION_WORDS) <= set(LANGUAGES) and set(FUNCTION_WORDS) <= set(LANGUAGE_CODES)
