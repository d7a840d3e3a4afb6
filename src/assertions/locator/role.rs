//! The roles a description can name, the words that name them (English and
//! Chinese), and the ARIA roles each accepts.

/// A role a description can ask for; each accepts the ARIA roles that fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Button,
    Link,
    Checkbox,
    Radio,
    Textbox,
    Heading,
    Image,
    Combobox,
    Tab,
    MenuItem,
    Dialog,
    ListItem,
    Slider,
    Switch,
}

/// The words (and two-word phrases) that name a role in a description.
pub(super) const ROLE_WORDS: &[(&str, Role)] = &[
    ("radio button", Role::Radio),
    ("check box", Role::Checkbox),
    ("tick box", Role::Checkbox),
    ("text field", Role::Textbox),
    ("text box", Role::Textbox),
    ("input field", Role::Textbox),
    ("combo box", Role::Combobox),
    ("menu item", Role::MenuItem),
    ("list item", Role::ListItem),
    ("button", Role::Button),
    ("btn", Role::Button),
    ("link", Role::Link),
    ("hyperlink", Role::Link),
    ("checkbox", Role::Checkbox),
    ("radio", Role::Radio),
    ("textbox", Role::Textbox),
    ("searchbox", Role::Textbox),
    ("textarea", Role::Textbox),
    ("field", Role::Textbox),
    ("input", Role::Textbox),
    ("box", Role::Textbox),
    ("heading", Role::Heading),
    ("headline", Role::Heading),
    ("image", Role::Image),
    ("img", Role::Image),
    ("picture", Role::Image),
    ("icon", Role::Image),
    ("logo", Role::Image),
    ("dropdown", Role::Combobox),
    ("combobox", Role::Combobox),
    ("select", Role::Combobox),
    ("tab", Role::Tab),
    ("menuitem", Role::MenuItem),
    ("dialog", Role::Dialog),
    ("modal", Role::Dialog),
    ("popup", Role::Dialog),
    ("slider", Role::Slider),
    ("switch", Role::Switch),
    ("toggle", Role::Switch),
    ("按钮", Role::Button),
    ("链接", Role::Link),
    ("复选框", Role::Checkbox),
    ("单选框", Role::Radio),
    ("单选按钮", Role::Radio),
    ("输入框", Role::Textbox),
    ("文本框", Role::Textbox),
    ("标题", Role::Heading),
    ("图片", Role::Image),
    ("下拉框", Role::Combobox),
    ("对话框", Role::Dialog),
    ("弹窗", Role::Dialog),
];

impl Role {
    /// The ARIA roles this role accepts (what the probe computes).
    pub fn aria(self) -> &'static [&'static str] {
        match self {
            Role::Button => &["button"],
            Role::Link => &["link"],
            Role::Checkbox => &["checkbox", "switch", "menuitemcheckbox"],
            Role::Radio => &["radio", "menuitemradio"],
            Role::Textbox => &["textbox", "searchbox", "spinbutton"],
            Role::Heading => &["heading"],
            Role::Image => &["img", "image"],
            Role::Combobox => &["combobox", "listbox"],
            Role::Tab => &["tab"],
            Role::MenuItem => &["menuitem", "menuitemcheckbox", "menuitemradio"],
            Role::Dialog => &["dialog", "alertdialog"],
            Role::ListItem => &["listitem"],
            Role::Slider => &["slider"],
            Role::Switch => &["switch", "checkbox"],
        }
    }

    pub(super) fn accepts(self, aria: &str) -> bool {
        self.aria().contains(&aria)
    }
}
